"""Names, places, events and the facts of one unit of the synthetic novel corpus, in Chinese (the
LongNovel corpus's language) and in English (for decoders that mostly read English, such as SmolLM2)."""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

SURNAMES = "李王张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗梁宋郑谢韩唐冯于董萧程曹袁邓许傅沈曾彭吕"
GIVEN = ["云飞", "青山", "明远", "志清", "寒霜", "月华", "天行", "海生", "玉堂", "雪晴", "安宁",
         "子衡", "若兰", "长风", "慕白", "书瑶", "景行", "惊鸿", "南星", "知秋", "怀瑾", "清远"]
PLACES = ["青石镇", "落霞山", "临安城", "白鹿书院", "黑水河畔", "望江楼", "寒山寺", "云梦泽",
          "洛阳城", "栖霞岭", "断桥边", "柳家庄", "铁匠铺", "城隍庙", "杏花村", "玄武湖"]
ITEMS = [("把", "长剑"), ("颗", "药丸"), ("两", "银子"), ("封", "书信"), ("匹", "战马"),
         ("卷", "古籍"), ("块", "玉佩"), ("支", "羽箭"), ("坛", "好酒"), ("石", "粮食")]
RELATIONS = ["师父", "父亲", "兄长", "师妹", "好友", "表哥", "恩人", "叔父", "同窗", "义兄"]
VERBS = [("谈话", "交谈"), ("争吵", "争执"), ("比武", "过招"), ("饮酒", "对饮"),
         ("下棋", "对弈"), ("商议", "筹划"), ("告别", "道别"), ("结盟", "约定结盟")]
ERRANDS = ["修好了木桥", "拜访了郎中", "买下了一匹马", "写了一封家书", "打探了消息", "埋葬了老仆",
           "烧毁了账本", "赎回了玉佩", "送走了客人", "拜祭了先祖", "关闭了店铺", "收留了孤儿"]
CAUSES = [("连日大雨不停", "山路被冲毁"), ("官府加征重税", "百姓纷纷逃离"),
          ("粮仓突然失火", "城中米价暴涨"), ("掌门突然病倒", "门派群龙无首"),
          ("河堤年久失修", "下游村庄被淹"), ("商队遭遇劫匪", "货物全部丢失"),
          ("边关战事吃紧", "朝廷四处征兵"), ("瘟疫在城中蔓延", "城门被下令关闭")]
FILLER = [
    "{p}的天色渐渐暗了下来，远处传来几声犬吠。", "街边的小贩高声吆喝着，行人来来往往。",
    "{x}望着窗外出神，心中思绪万千。", "一阵秋风吹过，树上的黄叶纷纷飘落。",
    "{x}端起茶杯，轻轻吹去浮在上面的茶叶。", "夜深了，{p}的灯火一盏一盏地熄灭。",
    "客栈里人声鼎沸，说书先生正讲到精彩之处。", "{x}想起了多年前的往事，不禁叹了口气。",
    "山间的雾气还没有散去，石阶上长满了青苔。", "{x}低声说道：“此事还需从长计议。”",
    "院子里的梅花开了，淡淡的香气弥漫开来。", "{x}收拾好行囊，在灯下翻看着一本旧书。",
    "河面上漂着几只小船，船夫哼着不知名的曲子。", "{p}的城墙在夕阳下显得格外苍凉。",
    "{x}沉默良久，终于开口问道：“你可曾后悔？”", "更夫敲着梆子走过长街，声音在夜里回荡。",
]


@dataclass(frozen=True)
class Lexicon:
    """The words a book of one language is drawn from. `verbs` are (summary form, narration form) pairs,
    `items` (measure word, item) pairs, `causes` (cause, effect) pairs; filler sentences may name the
    unit's place {p} and a cast member {x}."""
    language: str
    surnames: Sequence[str]
    given: Sequence[str]
    places: Sequence[str]
    items: Sequence[tuple[str, str]]
    relations: Sequence[str]
    verbs: Sequence[tuple[str, str]]
    errands: Sequence[str]
    causes: Sequence[tuple[str, str]]
    filler: Sequence[str]
    name_format: str = "{surname}{given}"

    def full_name(self, surname: str, given: str) -> str:
        return self.name_format.format(surname=surname, given=given)


ZH = Lexicon("zh", SURNAMES, GIVEN, PLACES, ITEMS, RELATIONS, VERBS, ERRANDS, CAUSES, FILLER)

EN = Lexicon(
    "en",
    surnames=["Reed", "Walker", "Hale", "Carter", "Shaw", "Brooks", "Turner", "Fletcher", "Mason", "Porter", "Hayes",
              "Ward", "Price", "Bennett", "Foster", "Graham", "Hunt", "Lane", "Marsh", "Palmer", "Quinn", "Rhodes",
              "Sloan", "Tate", "Vance", "Webb", "Young", "Archer", "Blake", "Cole", "Drake", "Ellis", "Flynn", "Grant",
              "Holt", "Irving", "Keane", "Lowe", "Moss", "Nash"],
    given=["Thomas", "Anna", "Henry", "Clara", "Samuel", "Grace", "Oliver", "Mary", "Edward", "Lucy", "Arthur",
           "Helen", "Walter", "Rose", "Daniel", "Ellen", "George", "Alice", "Peter", "Nora", "James", "Ruth"],
    places=["Stonebridge", "Sunset Ridge", "Linton", "Whitedeer Academy", "Blackwater Ford", "Riverview Tower",
            "Coldhill Temple", "Cloudmere", "Ashford", "Maple Pass", "Broken Bridge", "Willow Manor", "Ironworks Lane",
            "Temple Row", "Apricot Village", "Mirror Lake"],
    items=[("", "swords"), ("", "pills"), ("", "silver coins"), ("", "letters"), ("", "warhorses"),
           ("", "old scrolls"), ("", "jade pendants"), ("", "arrows"), ("", "jars of wine"), ("", "sacks of grain")],
    relations=["teacher", "father", "elder brother", "younger sister", "friend", "cousin", "benefactor", "uncle",
               "classmate", "sworn brother"],
    verbs=[("talked with", "talked"), ("quarrelled with", "argued"), ("sparred with", "crossed swords"),
           ("drank with", "shared a jar of wine"), ("played chess with", "played a long game of chess"),
           ("made plans with", "laid their plans"), ("parted from", "said their goodbyes"),
           ("formed an alliance with", "swore to stand together")],
    errands=["repaired the wooden bridge", "visited the doctor", "bought a horse", "wrote a letter home",
             "gathered news", "buried the old servant", "burned the ledger", "redeemed the jade pendant",
             "saw the guests off", "honoured the ancestors", "closed the shop", "took in an orphan"],
    causes=[("it rained for days on end", "the mountain road was washed away"),
            ("the magistrate raised the taxes", "the villagers fled one after another"),
            ("the granary caught fire", "the price of rice soared"),
            ("the head of the sect fell ill", "the sect was left without a leader"),
            ("the old levee gave way", "the villages downstream were flooded"),
            ("bandits robbed the caravan", "all the goods were lost"),
            ("war broke out on the frontier", "the court called up soldiers everywhere"),
            ("a plague spread through the city", "the city gates were ordered shut")],
    filler=[
        "The sky over {p} slowly darkened, and a few dogs barked in the distance.",
        "Peddlers shouted their wares along the street as people came and went.",
        "{x} gazed out of the window, lost in thought.", "An autumn wind blew past, and yellow leaves drifted down.",
        "{x} raised a cup of tea and gently blew away the leaves floating on it.",
        "Late at night, the lamps of {p} went out one by one.",
        "The inn was loud with voices, and the storyteller had reached the best part of his tale.",
        "{x} remembered something from many years ago and sighed.",
        "The mist in the hills had not yet lifted, and moss covered the stone steps.",
        "{x} said quietly, \"This matter needs more thought.\"",
        "The plum trees in the courtyard were in bloom, and a faint scent filled the air.",
        "{x} packed a bundle and leafed through an old book by the lamp.",
        "A few small boats drifted on the river while a boatman hummed a nameless tune.",
        "The walls of {p} looked bleak in the setting sun.",
        "{x} was silent for a long time, then finally asked, \"Do you have any regrets?\"",
        "The night watchman beat his clapper along the long street, and the sound echoed in the dark.",
    ],
    name_format="{given} {surname}")
LEXICONS = {"zh": ZH, "en": EN}


@dataclass
class UnitFacts:
    """The plot of one unit: everything the summaries restate."""
    a: str
    b: str
    rel: str
    place: str
    verb_idx: int
    num: int
    item_idx: int
    agreed: bool
    errands: tuple[str, str]
    cause_idx: int
    decoy: str          # another cast member, used by the entity rule
    fab_place: str      # a place this unit never mentions, for fabricated events


def chinese_number(n: int) -> str:
    """1..9999 in Chinese numerals (三百零五)."""
    if not 0 < n < 10000:
        raise ValueError(f"expected 1..9999, found {n}")
    digits, units, out, zero = "零一二三四五六七八九", ["千", "百", "十", ""], "", False
    for i, d in enumerate(f"{n:04d}"):
        d = int(d)
        if d == 0:
            zero = bool(out)
            continue
        if zero:
            out, zero = out + "零", False
        out += digits[d] + units[i]
    return out[1:] if out.startswith("一十") else out


def make_cast(rng: random.Random, size: int, lexicon: Lexicon = ZH) -> list[str]:
    names: list[str] = []
    while len(names) < size:
        name = lexicon.full_name(rng.choice(lexicon.surnames), rng.choice(lexicon.given))
        if name not in names:
            names.append(name)
    return names


def draw_facts(rng: random.Random, cast: list[str], lexicon: Lexicon = ZH) -> UnitFacts:
    a, b, decoy = rng.sample(cast, 3)
    place, fab_place = rng.sample(lexicon.places, 2)
    return UnitFacts(a=a, b=b, rel=rng.choice(lexicon.relations), place=place,
                     verb_idx=rng.randrange(len(lexicon.verbs)), num=rng.randint(2, 999),
                     item_idx=rng.randrange(len(lexicon.items)), agreed=rng.random() < 0.5,
                     errands=tuple(rng.sample(lexicon.errands, 2)), cause_idx=rng.randrange(len(lexicon.causes)),
                     decoy=decoy, fab_place=fab_place)
